# A Postgres image for machines that cannot pull `postgres:*`: Debian's
# server on the local base, with the part of the official image's interface
# the compose file uses (POSTGRES_USER, POSTGRES_DB, POSTGRES_PASSWORD_FILE,
# PGDATA, /docker-entrypoint-initdb.d, the command `postgres`, pg_isready).
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends postgresql \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/postgresql/data /var/run/postgresql /docker-entrypoint-initdb.d \
    && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
COPY postgres.entrypoint.sh /usr/local/bin/docker-entrypoint.sh

ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["postgres"]
