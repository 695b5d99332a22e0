"""Stage 7: what an engineer checks by hand (logs and their age, ports, GPU health, library
versions, CUDA graph capture), as typed findings beside the verdict. May import vocab and
accumulate."""
