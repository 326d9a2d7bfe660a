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
    "sphinx_gallery.gen_gallery",
]
autosummary_generate = True
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
exclude_patterns = ["_build"]
html_theme = "pydata_sphinx_theme"
html_title = "didmem"
nitpicky = False

# The gallery: every examples/plot_*.py runs at each build (each in seconds), so none can go
# stale; figures are rendered with the Agg backend. It lists only the scripts it runs: the
# other scripts of examples/ train lab models for minutes and are named in examples/README.rst
# (run them with python; tests/lab and the docs test run them under -m slow).
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"^(?!plot_).*\.py$",  # matched against the file name alone
    "matplotlib_animations": False,
    "download_all_examples": False,
    "remove_config_comments": True,
}

# Long lines in code blocks wrap instead of hiding behind a scrollbar (docs/_static/didmem.css).
html_static_path = ["_static"]
html_css_files = ["didmem.css"]
