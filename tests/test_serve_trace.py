"""Request traces (accel_sim.io.serve_trace): formats, field names, time units and every error."""

from __future__ import annotations

from pathlib import Path

import pytest
from accel_sim.errors import UsageError
from accel_sim.io.serve_trace import Trace, read_trace, write_jsonl


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def error(path: str, **kw) -> str:
    with pytest.raises(UsageError) as e:
        read_trace(path, **kw)
    message = str(e.value)
    assert "\n" not in message
    return message


# --- reading ---------------------------------------------------------------------------------

def test_jsonl_seconds_and_blank_lines(tmp_path):
    path = write(tmp_path, "t.jsonl",
                 '{"arrival_s": 10.5, "input_len": 100, "output_len": 20}\n'
                 "\n"
                 '{"arrival_s": 11.0, "input_len": 7, "output_len": 1, "id": "extra fields are ignored"}\n'
                 '   \n'
                 '{"arrival_s": 12.25, "input_len": 1, "output_len": 300}\n')
    t = read_trace(path)
    assert t == Trace(path, [0.0, 0.5, 1.75], [100, 7, 1], [20, 1, 300], None, 512)
    assert len(t) == 3


def test_mooncake_lines_milliseconds_to_seconds(tmp_path):
    # Mooncake-style records: timestamp in ms, lengths, one hash id per 512-token prompt block.
    # 6955 tokens -> ceil(6955/512) = 14 blocks; 6472 -> 13; 512 -> 1.
    path = write(tmp_path, "mooncake.jsonl",
                 '{"timestamp": 27482, "input_length": 6955, "output_length": 52, '
                 '"hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2353, 2354]}\n'
                 '{"timestamp": 30535, "input_length": 6472, "output_length": 26, '
                 '"hash_ids": [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2366]}\n'
                 '{"timestamp": 30851, "input_length": 512, "output_length": 1, "hash_ids": [9]}\n')
    t = read_trace(path)
    # (30535 - 27482) ms = 3.053 s; (30851 - 27482) ms = 3.369 s
    assert t.arrival_s == pytest.approx([0.0, 3.053, 3.369], abs=1e-12)
    assert t.input_len == [6955, 6472, 512]
    assert t.output_len == [52, 26, 1]
    assert t.block_hashes[0] == [46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 2353, 2354]
    assert t.block_hashes[2] == [9]
    assert t.hash_block_tokens == 512


def test_arrival_ms_and_timestamp_s(tmp_path):
    t = read_trace(write(tmp_path, "a.jsonl", '{"arrival_ms": 2000, "prompt_len": 3, "output_tokens": 4}\n'
                                              '{"arrival_ms": 2250.5, "prompt_len": 3, "output_tokens": 4}\n'))
    assert t.arrival_s == [0.0, 0.2505]  # 2.2505 - 2.0
    t = read_trace(write(tmp_path, "b.jsonl", '{"timestamp_s": 4, "prompt_tokens": 3, "completion_tokens": 4}\n'
                                              '{"timestamp_s": 6, "input_tokens": 5, "output_length": 2}\n'))
    assert (t.arrival_s, t.input_len, t.output_len) == ([0.0, 2.0], [3, 5], [4, 2])


def test_no_timestamps_means_no_arrivals(tmp_path):
    t = read_trace(write(tmp_path, "t.jsonl", '{"input_len": 5, "output_len": 6}\n{"input_len": 1, "output_len": 1}\n'))
    assert t.arrival_s is None and t.input_len == [5, 1] and t.block_hashes is None


def test_integral_floats_are_lengths(tmp_path):
    t = read_trace(write(tmp_path, "t.jsonl", '{"input_len": 12.0, "output_len": 3}\n'))
    assert t.input_len == [12] and type(t.input_len[0]) is int


def test_requests_without_hash_ids_get_none_in_a_hashed_trace(tmp_path):
    t = read_trace(write(tmp_path, "t.jsonl", '{"input_len": 5, "output_len": 6}\n'
                                              '{"input_len": 600, "output_len": 1, "hash_ids": [3, 4]}\n'))
    assert t.block_hashes == [[], [3, 4]]


def test_azure_datetime_relative_seconds(tmp_path):
    path = write(tmp_path, "azure.csv",
                 "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                 "2023-11-16 18:15:46.6805900,4808,10\n"
                 "2023-11-16 18:15:47.0000000,3180,8\n"
                 "2023-11-16 18:15:47.0000000,110,27\n")
    t = read_trace(path)
    # 47.0000000 - 46.6805900 = 0.3194100 s
    assert t.arrival_s == pytest.approx([0.0, 0.31941, 0.31941], abs=1e-12)
    assert t.input_len == [4808, 3180, 110]
    assert t.output_len == [10, 8, 27]
    assert t.block_hashes is None


def test_azure_datetime_across_midnight(tmp_path):
    path = write(tmp_path, "azure.csv",
                 "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                 "2023-11-16 23:59:59.9000000,1,1\n"
                 "2023-11-17 00:00:00.1000000,1,1\n"
                 "2023-11-17 00:01:00,1,1\n")
    # 0.1 s to midnight, then 0.1 s; the third is 60.1 s after the first
    assert read_trace(path).arrival_s == pytest.approx([0.0, 0.2, 60.1], abs=1e-12)


def test_csv_and_jsonl_read_the_same(tmp_path):
    csv_path = write(tmp_path, "t.csv",
                     "Timestamp,Input_Length,OUTPUT_LENGTH,hash_ids\n"
                     "1000,1024,5,7 8\n"
                     "\n"
                     "1500,1025,6,7;8;9\n"
                     "2250,10,7,\n")
    jsonl_path = write(tmp_path, "t.jsonl",
                       '{"timestamp": 1000, "input_length": 1024, "output_length": 5, "hash_ids": [7, 8]}\n'
                       '{"timestamp": 1500, "input_length": 1025, "output_length": 6, "hash_ids": [7, 8, 9]}\n'
                       '{"timestamp": 2250, "input_length": 10, "output_length": 7}\n')
    a, b = read_trace(csv_path), read_trace(jsonl_path)
    assert a.arrival_s == b.arrival_s == [0.0, 0.5, 1.25]
    assert a.input_len == b.input_len == [1024, 1025, 10]
    assert a.output_len == b.output_len == [5, 6, 7]
    assert a.block_hashes == b.block_hashes == [[7, 8], [7, 8, 9], []]


def test_csv_with_byte_order_mark_and_no_timestamps(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes("\ufeffinput_len,output_len\n3,4\n".encode())
    t = read_trace(str(path))
    assert (t.arrival_s, t.input_len, t.output_len) == (None, [3], [4])


def test_hash_block_tokens_override(tmp_path):
    # 513 tokens: ceil(513/512) = 2 blocks of 512, but ceil(513/256) = 3 blocks of 256
    path = write(tmp_path, "t.jsonl", '{"input_len": 513, "output_len": 1, "hash_ids": [1, 2, 3]}\n')
    assert read_trace(path, hash_block_tokens=256).block_hashes == [[1, 2, 3]]
    assert read_trace(path, hash_block_tokens=256).hash_block_tokens == 256
    assert "t.jsonl:1: 3 hash ids for a 513-token prompt" in error(path)


def test_round_trip(tmp_path):
    path = str(tmp_path / "w.jsonl")
    arrivals = [0.0, 0.1, 0.30000000000000004, 2.5, 2.5]
    write_jsonl(path, arrivals, [10, 20, 30, 40, 1], [1, 2, 3, 4, 5])
    t = read_trace(path)
    assert t == Trace(path, arrivals, [10, 20, 30, 40, 1], [1, 2, 3, 4, 5], None, 512)
    write_jsonl(path, None, [600, 2], [3, 4], block_hashes=[[1, 2], []])
    t = read_trace(path)
    assert (t.arrival_s, t.input_len, t.output_len, t.block_hashes) == (None, [600, 2], [3, 4], [[1, 2], []])


def test_write_jsonl_rejects_bad_requests(tmp_path):
    path = str(tmp_path / "w.jsonl")
    with pytest.raises(UsageError, match=r"2 input lengths, 1 output lengths"):
        write_jsonl(path, None, [1, 2], [1])
    with pytest.raises(UsageError, match=r"request 1: output_len must be a positive integer, got 0"):
        write_jsonl(path, None, [1, 2], [1, 0])
    with pytest.raises(UsageError, match=r"request 1: arrival 0.5 s .* previous request's 1.0 s"):
        write_jsonl(path, [1.0, 0.5], [1, 2], [1, 1])
    with pytest.raises(UsageError, match=r"empty trace"):
        write_jsonl(path, [], [], [])


# --- errors: the file --------------------------------------------------------------------------

def test_missing_file(tmp_path):
    path = str(tmp_path / "nope.jsonl")
    assert error(path) == f"{path}: trace file not found"


def test_unknown_suffix(tmp_path):
    path = write(tmp_path, "t.txt", "")
    assert error(path) == f"{path}: unknown trace format '.txt' (expected .jsonl or .csv)"


def test_unreadable_path(tmp_path):
    (tmp_path / "dir.jsonl").mkdir()
    assert error(str(tmp_path / "dir.jsonl")).endswith("dir.jsonl: is a directory, not a trace file")


def test_empty_traces(tmp_path):
    assert error(write(tmp_path, "e.jsonl", "\n  \n")).endswith("e.jsonl: empty trace: no requests")
    assert error(write(tmp_path, "h.csv", "input_len,output_len\n")).endswith("h.csv: empty trace: no requests")
    assert "e.csv: empty trace" in error(write(tmp_path, "e.csv", ""))


def test_bad_hash_block_tokens(tmp_path):
    path = write(tmp_path, "t.jsonl", '{"input_len": 1, "output_len": 1}\n')
    assert error(path, hash_block_tokens=0) == "hash_block_tokens must be a positive integer, got 0"


# --- errors: records ---------------------------------------------------------------------------

GOOD = '{"input_len": 5, "output_len": 6}\n'


def test_malformed_json_names_the_file_line(tmp_path):
    path = write(tmp_path, "t.jsonl", GOOD + "\n" + '{"input_len": 5, "output_len": }\n')
    assert error(path).startswith(f"{path}:3: malformed JSON: Expecting value at column 32")
    path = write(tmp_path, "u.jsonl", GOOD + GOOD.strip() + " x\n")
    assert error(path).startswith(f"{path}:2: malformed JSON: Extra data")


def test_line_that_is_not_an_object(tmp_path):
    path = write(tmp_path, "t.jsonl", GOOD + "[5, 6]\n")
    assert error(path) == f"{path}:2: expected a JSON object, got list"


def test_csv_row_with_wrong_number_of_columns(tmp_path):
    path = write(tmp_path, "t.csv", "input_len,output_len\n1,2\n3,4,5\n")
    assert error(path) == f"{path}:3: 3 columns, but the header (line 1) has 2"


def test_missing_length_fields(tmp_path):
    path = write(tmp_path, "t.jsonl", GOOD * 16 + '{"input_len": 5}\n')
    assert error(path) == (f"{path}:17: missing field 'output_len' (accepted: output_len, output_length, "
                           f"output_tokens, completion_tokens, GeneratedTokens)")
    path = write(tmp_path, "u.jsonl", '{"output_len": 5, "InputLen": 3}\n')
    assert error(path).startswith(f"{path}:1: missing field 'input_len' (accepted: input_len, input_length,")
    path = write(tmp_path, "t.csv", "timestamp,prompt_tokens\n1,2\n")
    assert error(path).startswith(f"{path}:1: missing field 'output_len' (accepted:")


@pytest.mark.parametrize("value, words", [
    ("12.5", "'output_len' must be an integer, got 12.5"),
    ('"12"', "'output_len' must be an integer, got '12'"),
    ("true", "'output_len' must be an integer, got True"),
    ("null", "'output_len' must be an integer, got None"),
    ("-3", "'output_len' must not be negative, got -3"),
    ("0", "'output_len' is 0: a request needs at least one output token"),
])
def test_bad_output_lengths(tmp_path, value, words):
    path = write(tmp_path, "t.jsonl", GOOD + f'{{"input_len": 5, "output_len": {value}}}\n')
    assert error(path) == f"{path}:2: {words}"


def test_bad_input_lengths(tmp_path):
    path = write(tmp_path, "t.jsonl", '{"input_length": 0, "output_len": 1}\n')
    assert error(path) == f"{path}:1: 'input_length' is 0: a request needs at least one prompt token"
    path = write(tmp_path, "t.csv", "ContextTokens,GeneratedTokens\n5,1\n-1,1\n")
    assert error(path) == f"{path}:3: 'ContextTokens' must not be negative, got -1"
    path = write(tmp_path, "u.csv", "ContextTokens,GeneratedTokens\n5,1\nfive,1\n")
    assert error(path) == f"{path}:3: 'ContextTokens' must be an integer, got 'five'"


# --- errors: timestamps ------------------------------------------------------------------------

def test_timestamp_not_a_number(tmp_path):
    path = write(tmp_path, "t.jsonl", '{"timestamp": "5", "input_len": 5, "output_len": 6}\n')
    assert error(path) == f"{path}:1: timestamp 'timestamp' must be a number, got '5'"
    path = write(tmp_path, "t.csv", "arrival_s,input_len,output_len\n1.5,5,6\nsoon,5,6\n")
    assert error(path) == f"{path}:3: timestamp 'arrival_s' must be a number, got 'soon'"
    path = write(tmp_path, "n.jsonl", '{"arrival_s": NaN, "input_len": 5, "output_len": 6}\n')
    assert error(path) == f"{path}:1: timestamp 'arrival_s' must be finite, got nan"


def test_unparseable_datetime(tmp_path):
    path = write(tmp_path, "t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                    "2023-11-16 18:15:46.6805900,1,1\n"
                                    "2023-11-16 18:15:4x.0000000,1,1\n")
    assert error(path) == (f"{path}:3: timestamp 'TIMESTAMP' '2023-11-16 18:15:4x.0000000' is not a number "
                           f"or a datetime YYYY-MM-DD HH:MM:SS[.fraction]")
    path = write(tmp_path, "u.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16,1,1\n")
    assert error(path).startswith(f"{path}:2: timestamp 'TIMESTAMP' '2023-11-16' is not a number or a datetime")


def test_negative_timestamp(tmp_path):
    path = write(tmp_path, "t.jsonl", '{"timestamp": -5, "input_len": 5, "output_len": 6}\n')
    assert error(path) == f"{path}:1: timestamp 'timestamp' must not be negative, got -5"
    path = write(tmp_path, "t.csv", "arrival_s,input_len,output_len\n-0.5,5,6\n")
    assert error(path) == f"{path}:2: timestamp 'arrival_s' must not be negative, got -0.5"


def test_unsorted_timestamps(tmp_path):
    rec = '{{"arrival_s": {}, "input_len": 5, "output_len": 6}}\n'
    path = write(tmp_path, "t.jsonl", rec.format(1.0) * 15 + rec.format(4.0) + rec.format(3.2))
    assert error(path) == (f"{path}:17: timestamp 3.2 s is earlier than line 16's 4.0 s "
                           f"(requests must be in arrival order)")
    rec = '{{"timestamp": {}, "input_len": 5, "output_len": 6}}\n'
    path = write(tmp_path, "m.jsonl", rec.format(4000) + rec.format(3200))
    assert error(path).startswith(f"{path}:2: timestamp 3200 ms is earlier than line 1's 4000 ms")
    path = write(tmp_path, "t.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                    "2023-11-16 18:15:47.0000000,1,1\n"
                                    "2023-11-16 18:15:46.9999999,1,1\n")
    assert error(path).startswith(f"{path}:3: timestamp 2023-11-16 18:15:46.9999999 is earlier than line 2's "
                                  f"2023-11-16 18:15:47.0000000")


def test_timestamps_on_some_requests_only(tmp_path):
    path = write(tmp_path, "t.jsonl", '{"arrival_s": 1, "input_len": 5, "output_len": 6}\n\n' + GOOD)
    assert error(path) == (f"{path}:3: no timestamp, but line 1 has one "
                           f"(give every request a timestamp, or none)")
    path = write(tmp_path, "u.jsonl", GOOD + '{"arrival_s": 1, "input_len": 5, "output_len": 6}\n')
    assert error(path).startswith(f"{path}:2: a timestamp, but line 1 has none")
    path = write(tmp_path, "t.csv", "arrival_s,input_len,output_len\n1,5,6\n,5,6\n")
    assert error(path).startswith(f"{path}:3: empty timestamp 'arrival_s'")


# --- errors: hash ids --------------------------------------------------------------------------

def test_hash_ids_not_a_list_of_ints(tmp_path):
    path = write(tmp_path, "t.jsonl", '{"input_len": 5, "output_len": 6, "hash_ids": 7}\n')
    assert error(path) == f"{path}:1: 'hash_ids' must be a list of integers, got 7"
    path = write(tmp_path, "u.jsonl", GOOD + '{"input_len": 5, "output_len": 6, "hash_ids": [1, "2"]}\n')
    assert error(path) == f"{path}:2: 'hash_ids' must be a list of integers, got [1, '2']"
    path = write(tmp_path, "t.csv", "input_len,output_len,hash_ids\n5,6,1 2.5\n")
    assert error(path).startswith(f"{path}:2: 'hash_ids' must be integers separated by spaces or ';'")


def test_too_many_hash_ids(tmp_path):
    # 1024 tokens are 2 blocks of 512; 3 ids is one too many
    path = write(tmp_path, "t.jsonl", '{"input_len": 1024, "output_len": 6, "hash_ids": [1, 2]}\n'
                                      '{"input_len": 1024, "output_len": 6, "hash_ids": [1, 2, 3]}\n')
    assert error(path) == (f"{path}:2: 3 hash ids for a 1024-token prompt: at most ceil(1024 / 512) = 2 "
                           f"blocks of 512 tokens")


# --- errors: values no request can hold ---------------------------------------------------------
# A request's lengths are the core's int32 (core/include/accelsim/serve.h, Request): 2^31 - 1 tokens
# at most. Beyond int64 they reached the core's conversion as a TypeError traceback; between
# 2^31 and 2^63 the core refused them without naming the file or the line.

INT32_MAX = 2**31 - 1


@pytest.mark.parametrize("value", [str(2**63), str(2**31), "1e300"])
def test_jsonl_length_beyond_what_a_request_holds(tmp_path, value):
    path = write(tmp_path, "t.jsonl", GOOD + f'{{"arrival_s": 0, "input_len": {value}, "output_len": 1}}\n')
    message = error(path)
    assert message.startswith(f"{path}:2: 'input_len' ") and message.endswith(
        f"is beyond {INT32_MAX:,} tokens (2^31 - 1), the most a request holds"), message


def test_csv_length_beyond_what_a_request_holds(tmp_path):
    path = write(tmp_path, "t.csv", f"input_len,output_len\n5,6\n7,{2**64}\n")
    assert error(path) == f"{path}:3: 'output_len' {2**64} is beyond {INT32_MAX:,} tokens (2^31 - 1), the most a request holds"


def test_the_longest_length_a_request_holds_is_read(tmp_path):
    t = read_trace(write(tmp_path, "t.jsonl", f'{{"input_len": {INT32_MAX}, "output_len": {INT32_MAX}}}\n'))
    assert t.input_len == [INT32_MAX] and t.output_len == [INT32_MAX]


@pytest.mark.parametrize("ids", [f"[1, {2**63}]", f"[{-2**63 - 1}]"])
def test_hash_ids_beyond_int64(tmp_path, ids):
    path = write(tmp_path, "t.jsonl", f'{{"input_len": 5000, "output_len": 1, "hash_ids": {ids}}}\n')
    assert error(path) == f"{path}:1: 'hash_ids' must be integers in [-2^63, 2^63), got {ids}"
    path = write(tmp_path, "t.csv", f"input_len,output_len,hash_ids\n5000,1,{ids.strip('[]').replace(', ', ';')}\n")
    assert error(path) == f"{path}:2: 'hash_ids' must be integers in [-2^63, 2^63), got {ids.strip('[]').replace(', ', ';')!r}"


@pytest.mark.parametrize("stamp", [str(10**400), "1e400", "-1e400"], ids=["10^400", "1e400", "-1e400"])
def test_timestamp_no_double_holds(tmp_path, stamp):
    # An integer of 400 digits overflowed math.isfinite (OverflowError traceback); 1e400 is JSON's inf.
    path = write(tmp_path, "t.jsonl", GOOD.replace("{", '{"arrival_s": 0, ') + f'{{"arrival_s": {stamp}, "input_len": 5, "output_len": 6}}\n')
    message = error(path)
    assert message.startswith(f"{path}:2: timestamp 'arrival_s' must be finite"), message


def test_nan_and_infinite_lengths(tmp_path):
    for value in ("NaN", "Infinity", "-Infinity"):
        path = write(tmp_path, "t.jsonl", f'{{"input_len": {value}, "output_len": 1}}\n')
        assert error(path) == f"{path}:1: 'input_len' must be an integer, got {float(value)!r}"


def test_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(GOOD.encode() * 3 + b'{"input_len": 5, "output_len": 6, "id": "\xff\xfe"}\n' + GOOD.encode())
    assert error(str(path)) == f"{path}:4: not UTF-8 text (invalid start byte at column 42)"
    path = tmp_path / "t.csv"
    path.write_bytes(b"input_len,output_len\n1,2\n3,\xc3\n")
    assert error(str(path)).startswith(f"{path}:3: not UTF-8 text (")


def test_deeply_nested_json_is_malformed_not_a_crash(tmp_path):
    path = write(tmp_path, "t.jsonl", GOOD + "[" * 100000 + "]" * 100000 + "\n")
    assert error(path) == f"{path}:2: malformed JSON: nested too deeply"


def test_csv_cell_beyond_the_csv_modules_limit(tmp_path):
    # csv.Error escaped as a traceback.
    path = write(tmp_path, "t.csv", 'input_len,output_len,id\n1,2,a\n1,2,"' + "x" * 200000 + '"\n')
    assert error(path) == f"{path}:3: not a CSV row: field larger than field limit (131072)"


def test_requests_beyond_the_models_positions(tmp_path):
    # A server refuses a request whose prompt plus output exceed the model's context (vLLM's
    # max_model_len, by default the config's max_position_embeddings).
    path = write(tmp_path, "t.jsonl", '{"input_len": 1000, "output_len": 24}\n{"input_len": 1000, "output_len": 25}\n')
    assert error(path, max_request_tokens=1024, limit="gpt2's 1024 positions") == (
        f"{path}:2: 'input_len' 1000 + 'output_len' 25 = 1,025 tokens, beyond gpt2's 1024 positions")
    assert read_trace(path, max_request_tokens=1025).input_len == [1000, 1000]
    path = write(tmp_path, "t.csv", "ContextTokens,GeneratedTokens\n1024,1\n")
    assert error(path, max_request_tokens=1024, limit="the model's 1024 positions") == (
        f"{path}:2: 'ContextTokens' 1024 + 'GeneratedTokens' 1 = 1,025 tokens, beyond the model's 1024 positions")
