"""Server-wide model resources, owned by the server and shared by every family (torch-free)."""
