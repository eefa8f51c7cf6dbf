"""The release of refmount, in a module of its own: the package's ``__init__`` exports the
Python API, which builds on the command line module, and that module needs the release."""

__version__ = "0.1.0"
