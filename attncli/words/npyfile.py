"""The .npy header, read from the first bytes of a file or of a .npz's member: what the cache's
entries and the --qkv files both check before a byte of data is read or inflated.
"""

from __future__ import annotations

import warnings

import numpy as np
from numpy.lib import format as npy


class NotNpy(ValueError):
    """The first bytes are not a .npy file's."""


def header(f) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """(shape, fortran_order, dtype, where the data starts) of the .npy file or member open as
    `f`, which is read past its header only. ValueError when it is not one: NotNpy where its
    first bytes are not a .npy's; where its format version is not one numpy writes (1.0, 2.0; 3.0 differs only
    in UTF-8 field names, which no numeric dtype has), or its header is damaged."""
    magic = f.read(npy.MAGIC_LEN)
    if len(magic) < npy.MAGIC_LEN or magic[:len(npy.MAGIC_PREFIX)] != npy.MAGIC_PREFIX:
        raise NotNpy("is not a numpy array")
    version = (magic[-2], magic[-1])
    with warnings.catch_warnings():  # numpy parses a damaged header as Python and may warn of it
        warnings.simplefilter("ignore", SyntaxWarning)
        if version == (1, 0):
            shape, fortran, dtype = npy.read_array_header_1_0(f)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = npy.read_array_header_2_0(f)
        else:
            raise ValueError(f"is of .npy format version {version[0]}.{version[1]}, which numpy does not write")
    return shape, fortran, dtype, f.tell()
