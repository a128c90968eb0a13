// Writing a result file the way a user expects, whatever PATH is:
//   "-"                      standard output;
//   a new or regular file    written to a fresh temporary beside it, then
//                            renamed over it, so PATH is only ever the old
//                            or the whole new content;
//   a symbolic link          resolved; its target is written as above, and
//                            the link stays a link;
//   a character device, a FIFO, or any path under /dev or /proc
//                            (/dev/null, /dev/stdout, a named pipe): written
//                            straight into, never replaced;
//   a directory or another kind of file: InputError, nothing written.
// The temporary is created with O_EXCL under a name of random letters, so an
// existing `PATH.tmp` (a file or a link) is never written through, and it is
// removed whenever writing or renaming fails.
#pragma once

#include <ostream>
#include <string>
#include <string_view>

namespace trainsim {

// Writes `text` to `path` as above; "-" writes to `standard_output`, which is
// also flushed before writing into a special file so the two keep their order.
// Errors are InputError naming `where` (the flag, e.g. "--json") and the path.
void write_output_file(const std::string& path, std::string_view text, std::ostream& standard_output,
                       const std::string& where);

}  // namespace trainsim
