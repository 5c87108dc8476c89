# syntax=docker/dockerfile:1
# The faultline image: the controller and the dmesg-exporter (`make image`).
# `make build` links bin/faultline statically (no cgo), so the runtime image is
# distroless static-debian12 (CA certificates, no shell, no libc), as the nonroot user.
# The probe agent, which needs cgo for NVML, has its own image (Dockerfile.probe-agent).

# Go at least the go.mod's go line (the Makefile sets GOTOOLCHAIN=local).
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Through make: it sets the build's flags (the tag kustomize_disable_go_plugin_support
# in GOFLAGS, which keeps Go's plugin package out of the binary).
RUN make build

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/bin/faultline /faultline
USER 65532:65532
ENTRYPOINT ["/faultline"]
