"""Compressed data given where text was expected: what it is and the command that decompresses it.

`vcbus validate` (vcbus.manifests) and `vcbus replay` (vcbus.logforms) name such an input for what
it is instead of reporting bytes that do not parse.
"""

from __future__ import annotations

import click

# The first bytes of each format, its name and the command that writes it out decompressed.
MAGIC = {b"\x1f\x8b": ("gzip", "gunzip -c"), b"BZh": ("bzip2", "bunzip2 -c"), b"\xfd7zXZ\x00": ("xz", "xz -dc"),
         b"\x28\xb5\x2f\xfd": ("zstd", "zstd -dc"), b"PK\x03\x04": ("zip", "unzip -p")}


def compressed_message(path: str, data: bytes, what: str, default_command: str, *, stdin: bool = True) -> str | None:
    """`PATH: gzip-compressed data, not WHAT: decompress it first (`gunzip -c PATH | vcbus ... -`)`
    when `data` starts as a compressed format does, else None. The command is the one running
    (`default_command` outside click); one that reads no standard input (not `stdin`) is given a file."""
    for magic, (kind, command) in MAGIC.items():
        if data.startswith(magic):
            shown = "FILE" if path in ("-", "<stdin>") else path
            context = click.get_current_context(silent=True)
            name = context.command_path if context is not None else default_command
            then = f"`{command} {shown} | {name} -`" if stdin else f"`{command} {shown} > watch.log`, then `{name} watch.log`"
            return f"{path}: {kind}-compressed data, not {what}: decompress it first ({then})"
    return None
