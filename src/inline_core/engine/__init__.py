"""Server-wide model resources, owned by the server and shared by every family: the runtime and
worker group (torch-free), and the resident stacks assembled for both (`stacks`, `remote`: torch,
imported on the first render)."""
