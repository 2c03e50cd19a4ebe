"""What the command lines share: checking settings before anything compiles, the key=value
arguments, --help."""
