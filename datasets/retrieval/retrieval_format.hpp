#pragma once
// LRA Document Retrieval (ACL Anthology Network citation pairs, byte level) without LibTorch: the
// reader of the official TSV files. Bytes become tokens through the text dataset's byte tokeniser
// (text_format.hpp), so both byte-level tasks share one vocabulary.
//
// Errors in data files are reported as attnlab::DataError (declared in attnlab/dataset.hpp); the
// message is one line: "<file>:<line>: <problem>".
#include <cstdint>
#include <string>
#include <string_view>

#include "text_format.hpp"

namespace attnlab::retrieval {

using text::ByteRows;
inline constexpr std::int64_t kVocabSize = text::kVocabSize;
inline constexpr std::int64_t kNumClasses = 2;

// File names of the three splits in a data folder; LRA's "eval" file is the validation split.
inline constexpr const char* kSplitFiles[3] = {"new_aan_pairs.train.tsv", "new_aan_pairs.eval.tsv",
                                               "new_aan_pairs.test.tsv"};

// The label column: "0", "1", or the same written as a float with zeros after the point ("1.0",
// "0.00"). Returns 0 or 1, or -1 for anything else.
int parse_label(std::string_view text);

// Reads one TSV file in the official format: no header, one pair per line ("\n" or "\r\n"), five
// tab-separated columns without quoting: label, id1, id2, text1, text2. Each text is tokenised
// (byte + 1), cut and padded as `shape` says: rows.inputs = 2, tokens [N, 2, shape.width] and
// lengths [N, 2] in ByteRows's layout. Throws attnlab::DataError naming the file (and line) for a file that
// cannot be opened or read, a file without pairs, a line without exactly five columns (blank lines
// included), a label other than 0/1 and an empty text.
ByteRows read_pairs(const std::string& path, text::RowShape shape);

}  // namespace attnlab::retrieval
