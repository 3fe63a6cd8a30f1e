"""Step previews: the x0 estimate of a render in progress made into a small image.

`formats` is the per-latent-format table (torch-free); `latent_rgb` and `tiny_decoder` are the two
methods that need torch; `renderer` picks one and encodes the image.
"""
