// Package lessons embeds the course's lessons: course.yaml (the module order) and one folder
// per module with its module.yaml and markdown lessons.
package lessons

import "embed"

// FS holds course.yaml and the module folders.
//
//go:embed course.yaml module*
var FS embed.FS
