# One image, three Cloud Run services: FUNCTION_TARGET picks api (default), access or emails.
# The base by digest (python:3.11-slim's multi-platform index), never by tag alone: a tag moves,
# a digest names the same bytes for every build (tests/deploy/test_pinned.py refuses a tag). A
# newer base is a deliberate change of this line (docs/deploy.md, "Known bytes").
ARG PYTHON_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

FROM ${PYTHON_IMAGE} AS build
# uv from PyPI rather than the ghcr.io/astral-sh/uv image: one registry fewer for the builder.
RUN pip install --no-cache-dir --disable-pip-version-check uv==0.13.9
ENV UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv
WORKDIR /app
COPY pyproject.toml uv.lock ./
# Bytecode checked against nothing (unchecked-hash): a .pyc that compared its source's mtime
# would be compiled again at every cold start (the service's user cannot write it) wherever a
# build or a layer rewrites timestamps.
RUN uv sync --frozen --no-dev --no-install-project && \
    /app/.venv/bin/python -m compileall -q --invalidation-mode unchecked-hash /app/.venv

FROM ${PYTHON_IMAGE} AS runtime
# APP_ENV defaults to production so that an image started without configuration refuses to run
# without its secrets instead of serving with development defaults (a public webhook secret).
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH="/app/.venv/bin:${PATH}" \
    PORT=8080 \
    APP_ENV=production
RUN useradd --system --user-group --home-dir /app --no-create-home --shell /usr/sbin/nologin app
WORKDIR /app
COPY --from=build /app/.venv /app/.venv
# What is left out is listed in .dockerignore; the code stays root-owned, read-only to `app`.
COPY . .
RUN python -m compileall -q --invalidation-mode unchecked-hash -x '/\.venv/' /app
USER app
EXPOSE 8080
CMD ["bin/serve"]
