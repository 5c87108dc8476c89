package packs

import "github.com/faultline-dev/faultline/rules"

// ImageCurrent reports whether the compiled image is of the embedded pack files.
func ImageCurrent() bool { return imageCurrent() }

// LoadImage loads the compiled image, current or not, never parsing the files.
func LoadImage() ([]*rules.Pack, error) { return image.Load() }
