// Package exercises embeds the course's exercises: one folder per module, one folder per
// exercise with its manifest, task, driver, starter, solution and variants.
package exercises

import "embed"

// FS holds the module folders.
//
//go:embed module*
var FS embed.FS
