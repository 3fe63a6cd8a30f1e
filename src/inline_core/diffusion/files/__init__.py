"""What a model file says without loading it (torch-free): safetensors headers and tensor shapes."""
