package main

import "github.com/mirrord/mirrord"

// parseProperties is mirrord.ParseProperties, for mirrors.go (a forward
// for the lead to drop when mirrors.go calls the API).
func parseProperties(text string) (map[string]string, error) { return mirrord.ParseProperties(text) }
