"""The reference set's names as a directory tree: built once at mount, queried by the filesystem."""
