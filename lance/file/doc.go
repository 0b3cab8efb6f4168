// Package file writes and reads Lance 2.0 data files (the files under a dataset's data/ folder):
// the container of protos/file2.proto with the v2.0 array encodings of
// protos/encodings_v2_0.proto, as the official engine (lance 8) writes and reads them. It also
// writes 2.1 and 2.2 files (Options.Version): leaf columns with repetition/definition levels in
// the structural layouts of protos/encodings_v2_1.proto (docs/lance-file-2.1-writing.md).
//
// Files:
//   - container.go: footer, offset tables, column/page metadata, file descriptor
//   - encoding.go:  ArrayEncoding messages (builders for the writer, a parser for the reader)
//   - writer.go, writer_pages.go: Writer; pages are encoded straight from retained Arrow arrays
//   - write21.go, write21_levels.go: the Writer's 2.1/2.2 state: leaves, levels, pages
//   - encode21_*.go: 2.1/2.2 pages (mini-block, full-zip, all-null) and their layout messages
//   - reader.go, read.go, decode.go: Open, Read and the page decoders
//
// Everything read from a file is checked against the file size and the buffer sizes before it
// is used to slice or allocate; problems come back as *FormatError.
package file
