from django.db import migrations

# The first unreserved address at or after a value, in one round trip: the search of
# networking/allocation.py, which otherwise costs a query per step. A reserved address in a block
# that is not full starts a gap scan bounded by the block's end; a full block (its count kept by
# the networking_count_reservation trigger) is skipped with the other full blocks after it,
# without reading their rows. 256 is networking.constants.BLOCK_SIZE.
FUNCTION = """
CREATE FUNCTION networking_first_unreserved(p_pool bigint, p_value numeric) RETURNS numeric AS $$
DECLARE
    v numeric := p_value;
    blk numeric;
    gap numeric;
BEGIN
    LOOP
        IF NOT EXISTS (
            SELECT 1 FROM networking_ipreservation WHERE pool_id = p_pool AND address = v
        ) THEN
            RETURN v;
        END IF;
        blk := div(v, 256);
        IF EXISTS (
            SELECT 1 FROM networking_reservationblock
            WHERE pool_id = p_pool AND block = blk AND taken >= 256
        ) THEN
            SELECT run.block + 1 INTO blk FROM (
                SELECT block, lead(block) OVER (ORDER BY block) AS following
                FROM networking_reservationblock
                WHERE pool_id = p_pool AND block >= blk AND taken >= 256
            ) run WHERE run.following IS NULL OR run.following > run.block + 1
            ORDER BY run.block LIMIT 1;
            v := blk * 256;
        ELSE
            SELECT run.address + 1 INTO gap FROM (
                SELECT address, lead(address) OVER (ORDER BY address) AS following
                FROM networking_ipreservation
                WHERE pool_id = p_pool AND address >= v AND address < (blk + 1) * 256
            ) run WHERE run.following IS NULL OR run.following > run.address + 1
            ORDER BY run.address LIMIT 1;
            IF gap < (blk + 1) * 256 THEN
                RETURN gap;
            END IF;
            v := (blk + 1) * 256;
        END IF;
    END LOOP;
END
$$ LANGUAGE plpgsql STABLE
-- Generic plans from the first call: custom planning of the first five calls in a session cost
-- more than the search itself, and the index fits every parameter value alike.
SET plan_cache_mode = force_generic_plan;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("networking", "0004_ipv6_and_reservation_blocks"),
    ]

    operations = [
        migrations.RunSQL(FUNCTION, "DROP FUNCTION networking_first_unreserved(bigint, numeric);"),
    ]
