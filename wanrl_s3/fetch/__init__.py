"""The reader side (private): plan a chain, download, verify, decode, install.

``chain`` (pure: which versions to read), ``download`` (parallel ranged GETs),
``subscriber`` (find, plan, download, verify, hand out), ``watch`` (background
prefetch for a worker that keeps generating), ``install_dir`` (a directory kept
at the newest version, renamed into place), ``host_cache`` (one download per
host) and ``files`` (pull to a .safetensors file, atomically).
"""
