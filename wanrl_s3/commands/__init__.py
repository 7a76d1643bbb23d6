"""The CLI's subcommands, one module each (see wanrl_s3.cli)."""
