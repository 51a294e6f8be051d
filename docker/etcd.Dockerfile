# etcd for the docker-compose cluster, built without pulling anything:
# `FROM scratch` plus a root file system that scripts/docker-build.sh prepares
# (Debian's etcd-server binary, the libraries `ldd` lists, bash for the health
# check, an empty /data owned by the unprivileged user).
FROM scratch
ADD rootfs.tar /
ENV ETCD_DATA_DIR=/data
USER 65534:65534
VOLUME /data
EXPOSE 2379
ENTRYPOINT ["/usr/local/bin/etcd"]
