// Package file writes and reads Lance 2.0 data files (the files under a dataset's data/ folder):
// the container of protos/file2.proto with the v2.0 array encodings of
// protos/encodings_v2_0.proto, as the official engine (lance 8) writes and reads them.
//
// Files:
//   - container.go: footer, offset tables, column/page metadata, file descriptor
//   - encoding.go:  ArrayEncoding messages (builders for the writer, a parser for the reader)
//   - writer.go, writer_pages.go: Writer; pages are encoded straight from retained Arrow arrays
//   - reader.go, read.go, decode.go: Open, Read and the page decoders
//
// Everything read from a file is checked against the file size and the buffer sizes before it
// is used to slice or allocate; problems come back as *FormatError.
package file
