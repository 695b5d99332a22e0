import threading
lock = threading.Lock()
print("taking the lock twice", flush=True)
lock.acquire()
lock.acquire()
