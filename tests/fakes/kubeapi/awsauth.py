"""EKS bearer tokens, checked as an EKS cluster's authenticator and AWS STS check them together.

`aws eks get-token` (and aws-iam-authenticator) make a token of the form `k8s-aws-v1.` + the base64url
of an STS `GetCallerIdentity` URL presigned with Signature Version 4, whose signed headers include
`x-k8s-aws-id: <cluster name>`. The cluster's authenticator sends that request to STS with the header,
and STS answers with the caller's ARN only when the signature is right for the caller's secret key,
the cluster name and the time. This emulator has no STS to ask: given the secret keys it accepts,
it recomputes the signature itself (the canonical request of a GET with an empty body, the string
to sign and the signing key of SigV4's query-string form, as STS does) and checks the rest of what
STS and the authenticator check: the action and version, an STS host, the cluster name among the
signed headers, the expiry.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import parse_qsl, quote, urlsplit

PREFIX = "k8s-aws-v1."
# aws-iam-authenticator takes a token for 15 minutes, whatever X-Amz-Expires says (the CLI says 60)
MAX_AGE_SECONDS = 15 * 60


@dataclass
class EksAuthenticator:
    """Accepts EKS tokens for `cluster_id` signed with one of `keys` (access key id -> (secret key,
    the user name the API server then sees, as an EKS access entry or aws-auth mapping names it))."""

    cluster_id: str
    keys: dict[str, tuple[str, str]] = field(default_factory=dict)
    now: float | None = None  # fixed "now" for tests of the expiry; None: the wall clock

    def user(self, token: str) -> str | None:
        """The user a token authenticates, or None when it is not a valid token for this cluster."""
        if not token.startswith(PREFIX):
            return None
        encoded = token[len(PREFIX) :]
        try:
            url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode("ascii")
        except (ValueError, UnicodeDecodeError):
            return None
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.scheme != "https" or not (host == "sts.amazonaws.com" or host.startswith("sts.")):
            return None
        if not host.endswith((".amazonaws.com", ".amazonaws.com.cn")) or parts.path not in ("", "/"):
            return None
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        query = dict(pairs)
        if len(query) != len(pairs):
            return None  # a parameter given twice
        if query.get("Action") != "GetCallerIdentity" or query.get("Version") != "2011-06-15":
            return None
        if query.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
            return None
        signed_headers = query.get("X-Amz-SignedHeaders", "")
        if signed_headers.split(";") != ["host", "x-k8s-aws-id"]:
            return None
        credential = query.get("X-Amz-Credential", "").split("/")
        if len(credential) != 5 or credential[3:] != ["sts", "aws4_request"]:
            return None
        access_key, day, region = credential[0], credential[1], credential[2]
        if access_key not in self.keys:
            return None
        amz_date = query.get("X-Amz-Date", "")
        try:
            signed_at = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
        except ValueError:
            return None
        now = time.time() if self.now is None else self.now
        if not amz_date.startswith(day) or not -300 <= now - signed_at <= MAX_AGE_SECONDS:
            return None
        secret, user = self.keys[access_key]
        canonical_query = "&".join(
            f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(pairs) if k != "X-Amz-Signature"
        )
        canonical_headers = f"host:{parts.netloc.lower()}\nx-k8s-aws-id:{self.cluster_id}\n"
        canonical_request = "\n".join(
            ["GET", "/", canonical_query, canonical_headers, signed_headers, hashlib.sha256(b"").hexdigest()]
        )
        scope = f"{day}/{region}/sts/aws4_request"
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest()]
        )
        key = f"AWS4{secret}".encode()
        for part in (day, region, "sts", "aws4_request"):
            key = hmac.new(key, part.encode(), hashlib.sha256).digest()
        expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        return user if hmac.compare_digest(expected, query.get("X-Amz-Signature", "")) else None
