# syntax=docker/dockerfile:1
# The faultline image: the controller and the dmesg-exporter (`make image`).
# `make build-faultline` links bin/faultline statically (no cgo), so the runtime image
# is distroless static-debian12 (CA certificates, no shell, no libc), as the nonroot
# user. The probe agent, its own program with cgo for NVML, has its own image
# (Dockerfile.probe-agent).

# Go at least the go.mod's go line (the Makefile sets GOTOOLCHAIN=local).
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Through make: it sets the build's flags (static, stripped, -trimpath).
RUN make build-faultline

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/bin/faultline /faultline
USER 65532:65532
ENTRYPOINT ["/faultline"]
