"""SSH key pairs for the ssh plugin's Secret, generated here because the domain has no randomness.

The ssh plugin (`statemachines.plugins.ssh`) emits its Secret with
`fill_ssh_keys=True` when the user gave no key; whoever applies the effect
calls `generate_ssh_keypair()` and `statemachines.plugins.ssh.fill_ssh_keys`.
The format is upstream's: a 2048-bit RSA key as PKCS#1 PEM
(`-----BEGIN RSA PRIVATE KEY-----`) and an OpenSSH `ssh-rsa <base64>` line
with a trailing newline and no comment.
"""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa


def generate_ssh_keypair(bits: int = 2048) -> tuple[str, str]:
    """A fresh (private PEM, public authorized-key line) pair."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    return private, public + "\n"
