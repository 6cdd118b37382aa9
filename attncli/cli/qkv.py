"""qkv init: projections written to a file."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np
from attncli import attention
from attncli.cli.options import output_options, output_path, vectors_options
from attncli.cli.output import emit
from attncli.cli.sections import Group
from attncli.learning.projections import MOST_D_K
from attncli.system.writing import write_whole


@click.group(cls=Group, short_help="query, key and value projections as .npz files")
def qkv():
    """Query, key and value projections, as files to edit, train elsewhere or share.

    \b
    Example:
      attncli qkv init --d-k 16 --seed 0 -o proj.npz
      attncli scores "The earth is like an orange" --qkv proj.npz
    """


@qkv.command(short_help="write random projections to a .npz file")
@click.option("--d-k", "d_k", type=click.IntRange(1, MOST_D_K), metavar="N",
              help=f"Size of queries, keys and values, at most {MOST_D_K:,}. Default: d.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, metavar="N", help="The random seed.")
@click.option("-o", "--output", type=click.Path(), callback=output_path("output"), required=True,
              help="The .npz file to write.")
@click.option("--force", is_flag=True, help="Replace the file if it exists.")
@vectors_options
@output_options
def init(d_k, seed, output, force, source, out):
    """Write W_query, W_key and W_value of shape (d, d_k), drawn as --qkv random draws them
    (Keras's "uniform": uniform on [-0.05, 0.05]), for the vectors' d. The file is written
    whole or not at all.

    \b
    Examples:
      attncli qkv init --d-k 16 --seed 0 -o proj.npz
      attncli qkv init --vectors GoogleNews-vectors-negative300.bin --d-k 64 -o big.npz
    """
    path = Path(output)
    if path.exists() and not force:
        raise click.UsageError(f"{path} exists; give --force to replace it")
    d = source.load().dim
    arrays = attention.init_projections(d, d_k or d, seed)
    write_whole(path, lambda f: np.savez(f, **arrays))
    emit([{"path": str(path), "d": d, "d_k": d_k or d, "seed": seed, "arrays": list(arrays)}], out, "info_view")
