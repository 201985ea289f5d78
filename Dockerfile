# GPU Portal's production image: one image for web, worker, beat, collector and migrations.
#   docker build -t gpu-portal .          (python:3.12-slim)
#   docker run gpu-portal web|worker|beat|collector|migrate
# BASE may be any Debian-like image with python3 and its venv module.
ARG BASE=python:3.12-slim

FROM ${BASE} AS build
# A CA bundle for pip, for networks that intercept TLS; mounted at build time, never copied in.
ARG CA_BUNDLE=
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
RUN python3 -m venv /opt/venv
# Dependencies first, from the pinned lock, so code changes reuse this layer. Its hashes put pip
# in hash-checking mode: a file that is not the one hashed fails the build. Wheels only: a source
# build would fetch build dependencies no hash covers.
COPY deploy/image/requirements.lock /tmp/requirements.lock
RUN /opt/venv/bin/pip install ${CA_BUNDLE:+--cert "$CA_BUNDLE"} --no-deps --only-binary=:all: \
    -r /tmp/requirements.lock \
 && /opt/venv/bin/pip check
WORKDIR /app
COPY manage.py pyproject.toml ./
COPY portal portal
COPY core core
COPY k8s_adapters k8s_adapters
COPY tenants tenants
COPY jobs jobs
COPY networking networking
COPY accounts accounts
COPY templates templates
COPY static static
# Static files are collected now, so the running container writes nothing under /app.
RUN SECRET_KEY=build-only ENDPOINT_WILDCARD_DOMAIN=build.invalid STATIC_ROOT=/app/staticfiles \
    /opt/venv/bin/python manage.py collectstatic --noinput -v 0 \
 && /opt/venv/bin/python -m compileall -q /app

FROM ${BASE}
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    STATIC_ROOT=/app/staticfiles PORT=8000
# A fixed non-root uid/gid, so Kubernetes' runAsNonRoot can check it without a user name.
# Written directly: minimal bases may lack useradd.
RUN echo 'portal:x:10001:10001:GPU Portal:/app:/usr/sbin/nologin' >>/etc/passwd \
 && echo 'portal:x:10001:' >>/etc/group
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app /app
COPY deploy/image/gpu-portal /usr/local/bin/gpu-portal
USER 10001:10001
WORKDIR /app
EXPOSE 8000
ENTRYPOINT ["gpu-portal"]
CMD ["web"]
