"""kolo: a data-parallel training runtime. Framework bindings live in subpackages (kolo.torch)."""
