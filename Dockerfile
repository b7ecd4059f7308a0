# The vcbus image: `vcbus` as entrypoint, run by a non-root user (uid 10001).
#
#   docker build -t REGISTRY/vcbus:0.1.0 .
#   docker run --rm REGISTRY/vcbus:0.1.0 up --help
#
# deploy/vcbus/ runs it as `vcbus up --cluster --nats nats://nats.vcbus-system:4222`
# and deploy/webhook/ as `vcbus webhook ...` (docs/deploy.md).
#
# Pinned: the base image by digest (python:3.11-slim; where the digest comes from and how to move
# it: docs/deploy.md "The image"), the build tool by version and hash (requirements-build.lock) and
# every Python package by version and hash (requirements.lock; both written by `make lock`).
ARG PYTHON_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

# Build stage: wheels of every locked package (pip refuses a file whose hash is not in the lock; the
# one sdist, nkeys, is built with the pinned setuptools) and of vcbus from the sources only (no
# .venv, no tests, no examples).
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY requirements.lock requirements-build.lock pyproject.toml README.md ./
RUN pip install --require-hashes -r requirements-build.lock \
    && pip wheel --no-build-isolation --require-hashes --no-deps -r requirements.lock --wheel-dir /wheels
COPY statemachines ./statemachines
COPY projections ./projections
COPY vcbus ./vcbus
RUN pip wheel --no-deps --no-build-isolation --wheel-dir /wheels .

# Runtime: those wheels only (--no-index: nothing is fetched or resolved here), a non-root user.
FROM ${PYTHON_IMAGE}
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/vcbus vcbus
COPY --from=build /wheels /wheels
RUN pip install --no-index --no-deps /wheels/*.whl && rm -rf /wheels
USER 10001:10001
WORKDIR /home/vcbus
ENTRYPOINT ["vcbus"]
CMD ["--help"]
