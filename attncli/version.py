"""attncli's version, in a module of its own: the package's __init__ imports the modules
that record it (the cache's entries, trained files), which must not import the package.
"""

__version__ = "0.2.0"
