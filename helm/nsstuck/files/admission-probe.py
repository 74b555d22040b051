"""The chart's `helm test` of the namespace-delete admission webhook (templates/tests/test-admission.yaml).

    python admission-probe.py --url https://SERVICE.NAMESPACE.svc:443/admission/namespaces/CLUSTER \
        --ca ca.crt --namespace NAMESPACE

POSTs an AdmissionReview v1 of a dry-run DELETE of NAMESPACE over TLS, the server's certificate checked
against --ca (the CA the webhook configuration's caBundle holds), and checks that the answer is an
AdmissionReview v1 with the same uid and a decision. A dry run: nsstuck posts nothing, opens no incident
and writes no audit entry for it. Prints the decision and the warnings; exit 0 when the endpoint
answered so, 1 otherwise (one line saying why). Python's standard library only: it runs in nsstuck's
image and in the tests (tests/chart/test_chart_admission.py) alike.
"""

from __future__ import annotations

import argparse
import http.client
import json
import ssl
import sys
import urllib.parse
import uuid


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="admission-probe", description="ask nsstuck's admission webhook")
    parser.add_argument("--url", required=True, help="the webhook's https:// URL, its path included")
    parser.add_argument("--ca", required=True, help="the CA certificate (PEM) that signed the serving certificate")
    parser.add_argument("--namespace", required=True, help="the namespace whose delete is asked about (a dry run)")
    parser.add_argument("--timeout", type=float, default=35.0, help="seconds (default 35: the webhook's 30 and more)")
    args = parser.parse_args(argv)
    uid = str(uuid.uuid4())
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Namespace"},
            "resource": {"group": "", "version": "v1", "resource": "namespaces"},
            "name": args.namespace,
            "operation": "DELETE",
            "userInfo": {"username": "helm-test:admission-probe"},
            "oldObject": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": args.namespace}},
            "dryRun": True,
        },
    }
    url = urllib.parse.urlsplit(args.url)
    if url.scheme != "https" or not url.hostname:
        print(f"admission probe failed: --url {args.url!r} is not an https:// URL")
        return 1
    try:
        context = ssl.create_default_context(cafile=args.ca)
    except (OSError, ssl.SSLError) as e:
        print(f"admission probe failed: the CA {args.ca!r} does not load: {e}")
        return 1
    connection = http.client.HTTPSConnection(url.hostname, url.port or 443, timeout=args.timeout, context=context)
    try:
        connection.request(
            "POST", url.path or "/", body=json.dumps(review).encode(), headers={"Content-Type": "application/json"}
        )
        answer = connection.getresponse()
        status, body = answer.status, answer.read()
    except (OSError, http.client.HTTPException) as e:
        print(f"admission probe failed: {args.url}: {e}")
        return 1
    finally:
        connection.close()
    if status != 200:
        print(f"admission probe failed: {args.url} answered {status}: {body[:300].decode(errors='replace').strip()}")
        return 1
    try:
        document = json.loads(body)
        response = document["response"]
        decided = document["apiVersion"] == "admission.k8s.io/v1" and isinstance(response["allowed"], bool)
    except (ValueError, KeyError, TypeError):
        decided = False
    if not decided:
        print(f"admission probe failed: {args.url} answered {status} but not an AdmissionReview v1 with a decision")
        return 1
    if response.get("uid") != uid:
        print(f"admission probe failed: the answer's uid {response.get('uid')!r} is not the review's {uid!r}")
        return 1
    if response["allowed"]:
        print(f"admission probe: {status}, a delete of {args.namespace} would be allowed")
    else:
        message = (response.get("status") or {}).get("message", "")
        print(f"admission probe: {status}, a delete of {args.namespace} would be refused: {message}")
    for warning in response.get("warnings") or ():
        print(f"Warning: {warning}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
