"""unpooled: on-demand, importance-sampled evaluation of knowledge base population."""

__version__ = "0.1.0"
