"""Sphinx configuration of the didmem documentation."""

import didmem

project = "didmem"
author = "the didmem developers"
release = didmem.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
]
autosummary_generate = True
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
exclude_patterns = ["_build"]
html_theme = "pydata_sphinx_theme"
html_title = "didmem"
nitpicky = False
