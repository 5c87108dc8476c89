//go:build !linux

package main

import "log/slog"

// releaseStartupPages is Linux-only (see pages_linux.go).
func releaseStartupPages() (int64, error) { return 0, nil }

func releaseStartupPagesLogged(*slog.Logger) {}
