# The vcbus image: `vcbus` as entrypoint, run by a non-root user (uid 10001).
#
#   docker build -t REGISTRY/vcbus:0.1.0 .
#   docker run --rm REGISTRY/vcbus:0.1.0 up --help
#
# deploy/vcbus/ runs it as `vcbus up --cluster --nats nats://nats.vcbus-system:4222`
# and deploy/webhook/ as `vcbus webhook ...` (docs/deploy.md).

# Build a wheel from the sources only (no .venv, no tests, no examples).
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY statemachines ./statemachines
COPY projections ./projections
COPY vcbus ./vcbus
RUN pip wheel --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/vcbus vcbus
COPY --from=build /wheels /wheels
RUN pip install /wheels/*.whl && rm -rf /wheels
USER 10001:10001
WORKDIR /home/vcbus
ENTRYPOINT ["vcbus"]
CMD ["--help"]
