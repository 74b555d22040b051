# nsstuck: the Slack bot and CLI as a container image (README "Install in a cluster").
#
#   docker build -t registry.example.com/platform/nsstuck:0.1.0 .
#   docker run --rm registry.example.com/platform/nsstuck:0.1.0 --help
#
# Two stages: the first builds nsstuck's wheel and installs it, with the dependencies pinned in
# requirements/constraints.txt (wheels only), into a virtual environment; the second is the slim
# Python image with that environment and an unprivileged user: no compiler, no pip, no source tree.
# The wheel carries the Alembic migrations (share/nsstuck/migrations), so `nsstuck db upgrade` runs
# from the image. The Python is the one the test suite runs on (CI: 3.11). The AWS CLI, from PyPI,
# pinned in requirements/aws.txt, lives in an environment of its own (/opt/aws) with `aws` on the PATH,
# so that kubeconfigs whose exec plugin is `aws eks get-token` work as they are.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY requirements/constraints.txt requirements/aws.txt requirements/
COPY pyproject.toml README.md ./
COPY migrations/ migrations/
COPY bot/ bot/
RUN python -m venv /opt/nsstuck \
 && python -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
 && /opt/nsstuck/bin/pip install --no-cache-dir --only-binary=:all: \
      --constraint requirements/constraints.txt /wheels/nsstuck-*.whl \
 && /opt/nsstuck/bin/pip uninstall --yes pip setuptools \
 && /opt/nsstuck/bin/nsstuck --help >/dev/null \
 && /opt/nsstuck/bin/python -c "from bot.store.migrating import migrations_dir; print(migrations_dir())"
RUN python -m venv /opt/aws \
 && /opt/aws/bin/pip install --no-cache-dir --only-binary=:all: --requirement requirements/aws.txt \
 && /opt/aws/bin/pip uninstall --yes pip setuptools \
 && ln -s /opt/aws/bin/aws /opt/nsstuck/bin/aws \
 && /opt/nsstuck/bin/aws --version

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="nsstuck" \
      org.opencontainers.image.description="Finds out why a Kubernetes namespace is stuck in Terminating, and fixes it safely from Slack." \
      org.opencontainers.image.licenses="Apache-2.0"
# the root file system may be read-only (the Helm chart makes it so): no bytecode written at run time
ENV PATH=/opt/nsstuck/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NSSTUCK_HTTP_PORT=3000 \
    NSSTUCK_METRICS_PORT=9090
# no installer left in the image either: the base image's own pip goes
RUN python -m pip uninstall --yes --quiet pip setuptools wheel \
 && groupadd --system --gid 10001 nsstuck \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/nsstuck --create-home \
      --shell /usr/sbin/nologin nsstuck
COPY --from=build /opt/nsstuck /opt/nsstuck
COPY --from=build /opt/aws /opt/aws
# numeric, so that Kubernetes can check runAsNonRoot
USER 10001:10001
# the default SQLite database (sqlite:///nsstuck.db) lands here
WORKDIR /var/lib/nsstuck
# 3000: Slack's events, /healthz, /readyz; 9090: /metrics alone
EXPOSE 3000 9090
# no curl in a slim image: Python asks /healthz on the port nsstuck serves
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('NSSTUCK_HTTP_PORT', '3000'), timeout=4)"]
ENTRYPOINT ["nsstuck"]
CMD ["serve"]
