# Prometheus for the docker-compose cluster, built without pulling anything:
# `FROM scratch` plus a root file system that scripts/docker-build.sh prepares
# from Debian's prometheus package and the packages its web UI's files link
# to (the binary, the libraries `ldd` lists, bash for the health check, an
# empty /data for the time series, owned by the unprivileged user).
# docker-compose.yml mounts docker/prometheus.yml as its configuration.
FROM scratch
ADD rootfs.tar /
USER 65534:65534
VOLUME /data
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus", "--config.file=/etc/prometheus/prometheus.yml", \
            "--storage.tsdb.path=/data", "--web.listen-address=0.0.0.0:9090"]
