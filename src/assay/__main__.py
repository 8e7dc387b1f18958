"""`python -m assay`: the same program as the `assay` command."""

from assay.cli import console

console()
