package search

// Wildmatch reports whether the root-relative, slash-separated path text
// matches the gitignore pattern p (without "!", a leading "/" or a
// trailing "/"), as git's wildmatch with WM_PATHNAME decides: "*" and "?"
// stay within a path element, "**/" at the start, "/**" at the end and
// "/**/" in the middle cross any number of them, "[...]" is a class and
// "\" escapes. It is the matcher .gitignore files use here (see
// gitignore.go); it never panics, and its work is polynomial in the
// lengths of p and text.
func Wildmatch(p, text string) bool { return wildmatch(p, text) }
