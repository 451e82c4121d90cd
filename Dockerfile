# kenny-server in a container: build both binaries, run the server as an unprivileged
# user with its data on a volume. The agent build is inside too, for install links and
# updates: `docker compose exec kenny kenny-server releases add /usr/local/lib/kenny/kenny-agent
# --version <v> --os linux --arch x86_64`. See deploy/compose.yaml.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock rustfmt.toml clippy.toml ./
COPY crates ./crates
RUN cargo build --profile dist --locked -p kenny-server \
 && cargo build --profile dist-agent --locked -p kenny-agent

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --home-dir /var/lib/kenny --shell /usr/sbin/nologin kenny \
 && mkdir -p /var/lib/kenny /usr/local/lib/kenny \
 && chown kenny:kenny /var/lib/kenny \
 && chmod 0700 /var/lib/kenny
COPY --from=build /src/target/dist/kenny-server /usr/local/bin/kenny-server
COPY --from=build /src/target/dist-agent/kenny-agent /usr/local/lib/kenny/kenny-agent
USER kenny
ENV KENNY_LISTEN=0.0.0.0:7420 KENNY_DATA_DIR=/var/lib/kenny
VOLUME ["/var/lib/kenny"]
EXPOSE 7420
HEALTHCHECK --interval=30s --timeout=5s CMD curl -fsS http://127.0.0.1:7420/readyz || exit 1
ENTRYPOINT ["/usr/local/bin/kenny-server"]
CMD ["serve"]
