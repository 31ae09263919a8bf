"""llama.cpp (through llama-cpp-python): the decoder workloads, written to GGUF by `gguf`."""
