"""NVIDIA GPUs: ioctl request decoding (nvidia) and NVML readings through nvidia-ml-py (nvml).
May import: tracer.events, tracer.linux."""
