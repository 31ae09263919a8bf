"""OpenVINO GenAI: the decoder workloads, exported by optimum-intel."""
