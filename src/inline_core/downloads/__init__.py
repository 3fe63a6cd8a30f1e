"""Explicit model downloads into the models folder: what a family can fetch (`targets`), the hub
seam (`hub`: huggingface_hub for listings, URLs, auth and errors), one file's verified, resumable
transfer (`transfer`, `hashing`), the durable records (`records`, `store`) and the manager that
queues and runs them (`manager`), shared by the server's routes and `inline-core download`
(`cli`). Never called by a render."""
