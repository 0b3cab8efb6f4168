// Package file writes and reads Lance data files (the files under a dataset's data/ folder) of
// formats 2.0, 2.1 and 2.2, as the official engines (Lance 8, 10 and 12) write and read them.
// A 2.0 file is the container of protos/file2.proto with the array encodings of
// protos/encodings_v2_0.proto, one column per field (parents included); a 2.1/2.2 file has the
// same container with the structural page layouts of protos/encodings_v2_1.proto (mini-block,
// full-zip, constant/all-null) and one column per leaf field, repetition and definition levels
// carrying the lists and nulls above it.
//
// Files:
//   - version.go: Version, what this build reads and writes, *UnsupportedVersionError
//   - container.go: footer, offset tables, column/page metadata, file descriptor
//   - encoding.go: 2.0 ArrayEncoding messages (builders for the writer, a parser for the reader)
//   - writer.go, writer_pages.go: Writer and its 2.0 pages, encoded straight from retained
//     Arrow arrays; write21*.go, encode21_*.go: the 2.1/2.2 leaf columns and pages
//   - reader.go, read.go, decode.go: Open, Read and the 2.0 page decoders; read21*.go,
//     decode21.go, pagelayout21.go, fastlanes21.go: the 2.1/2.2 layouts and compressions
//
// Everything read from a file is checked against the file size and the buffer sizes before it
// is used to slice or allocate; problems come back as *FormatError. The facts behind the 2.1/2.2
// code are in the repository's docs/lance-file-2.1.md and docs/lance-file-2.1-writing.md.
package file
