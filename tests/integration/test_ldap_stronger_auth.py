"""A domain controller that requires LDAP signing / TLS answers a simple bind over plain LDAP with
``strongerAuthRequired`` (RFC 4511 4.1.9, result code 8). The Samba fixture runs with ``ldap server
require strong auth = no`` (and does not re-read it without a restart), so the refusal comes here
from a stand-in LDAP server on 127.0.0.1 answering a real ldap3 bind with the BER message Samba
sends (encoded with ldap3's RFC 4511 ASN.1 classes); the connector must say that the DC requires
LDAPS/StartTLS or signing, and which setting to change."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator

import pytest
from ldap3.protocol.rfc4511 import BindResponse, LDAPMessage, ProtocolOp, ResultCode
from pyasn1.codec.ber import decoder, encoder
from pyasn1.error import PyAsn1Error

from ancre.acl.ldap_directory import LdapDirectory
from ancre.errors import DirectoryError

SAMBA_MESSAGE = "BindSimple: Transport encryption required."


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        buf = b""
        while True:
            data = self.request.recv(65536)
            if not data:
                return
            buf += data
            while buf:
                try:
                    msg, buf = decoder.decode(buf, asn1Spec=LDAPMessage())
                except PyAsn1Error:
                    break  # incomplete: read more
                if msg["protocolOp"].getName() != "bindRequest":
                    return  # unbind or anything else: hang up
                result = BindResponse()
                result["resultCode"] = ResultCode("strongerAuthRequired")
                result["matchedDN"] = ""
                result["diagnosticMessage"] = SAMBA_MESSAGE
                op = ProtocolOp()
                op.setComponentByName("bindResponse", result)
                reply = LDAPMessage()
                reply["messageID"] = msg["messageID"]
                reply["protocolOp"] = op
                self.request.sendall(encoder.encode(reply))


@pytest.fixture()
def strict_dc() -> Iterator[int]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_stronger_auth_required_says_the_dc_wants_tls_or_signing(strict_dc: int) -> None:
    d = LdapDirectory(
        [f"ldap://127.0.0.1:{strict_dc}"], "DC=axonix,DC=test", bind_dn="svc-ancre@axonix.test",
        bind_password="secret-pw", tls="none", timeout_s=5,
    )
    with pytest.raises(DirectoryError) as err:
        d.principals("chloe")
    msg = str(err.value)
    assert "requires LDAPS/StartTLS or signing" in msg and "strongerAuthRequired" in msg
    assert SAMBA_MESSAGE in msg and 'tls = "none"' in msg and "ldaps://" in msg
    assert "secret-pw" not in msg and "\n" not in msg
